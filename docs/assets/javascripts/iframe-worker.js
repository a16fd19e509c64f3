// The docs site's search opened from disk (file://): a browser makes no Web
// Worker from a file:// page, and the theme's search runs in one. This stands
// in for Worker there only: the worker's script runs in a hidden iframe of the
// page, and messages go between the two as a worker's would. (mkdocs-material's
// offline plugin would load a shim like this one from unpkg.com; this copy
// needs no network. Its name holds "iframe-worker", which tells the plugin.)
"use strict";
(function () {
  if (location.protocol !== "file:") return;

  class IFrameWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.onerror = null;
      this.queue = [];
      this.ready = false;
      const iframe = document.createElement("iframe");
      iframe.hidden = true;
      iframe.setAttribute("aria-hidden", "true");
      (document.body || document.documentElement).appendChild(iframe);
      this.iframe = iframe;
      const scope = iframe.contentWindow;
      const worker = this;
      // what the worker script calls postMessage answers the page
      scope.postMessage = (data) => worker.deliver(new MessageEvent("message", { data }));
      scope.importScripts = (...urls) => {
        for (const src of urls) {
          const request = new XMLHttpRequest();
          request.open("GET", new URL(src, url), false);
          request.send();
          scope.eval(request.responseText);
        }
      };
      const script = scope.document.createElement("script");
      script.src = new URL(url, location.href).href;
      script.onload = () => {
        this.ready = true;
        for (const data of this.queue.splice(0)) this.post(data);
      };
      script.onerror = () => this.deliver(new ErrorEvent("error", { message: "could not load " + url }));
      scope.document.head.appendChild(script);
    }

    deliver(event) {
      const handler = event.type === "message" ? this.onmessage : this.onerror;
      if (typeof handler === "function") handler.call(this, event);
      this.dispatchEvent(event);
    }

    post(data) {
      this.iframe.contentWindow.dispatchEvent(new MessageEvent("message", { data }));
    }

    postMessage(data) {
      if (this.ready) this.post(data);
      else this.queue.push(data);
    }

    terminate() {
      this.iframe.remove();
    }
  }

  window.Worker = IFrameWorker;
})();
