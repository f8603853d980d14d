// Resumable uploads to cloud storage with tus-js-client (tus 1.0.0). An upload that was interrupted — network
// gone, page closed — is found again by tus-js-client's fingerprint (name, size, date of the file) in
// localStorage, and continues from the offset the server reports.
(function () {
  "use strict";

  var widget = document.getElementById("storage-upload");
  if (!widget || !window.tus) return;
  var input = document.getElementById("storage-file-input");
  var list = document.getElementById("upload-list");
  var data = widget.dataset;

  function formatBytes(bytes) {
    var units = ["B", "KB", "MB", "GB", "TB"];
    var i = 0;
    while (bytes >= 1024 && i < units.length - 1) { bytes /= 1024; i += 1; }
    return (i === 0 ? bytes : bytes.toFixed(1)) + " " + units[i];
  }

  function serverMessage(error) {
    // Our API answers {"code", "message"} in the user's language; show that rather than tus's English text.
    var response = error && error.originalResponse;
    if (!response) return null;
    try {
      var body = JSON.parse(response.getBody());
      return body && body.message;
    } catch (e) {
      return null;
    }
  }

  function row(file) {
    var item = document.createElement("li");
    item.className = "mb-2 upload-item";
    item.dataset.filename = file.name;
    var label = document.createElement("div");
    label.className = "d-flex justify-content-between small";
    var name = document.createElement("span");
    name.textContent = file.name;
    var status = document.createElement("span");
    status.className = "upload-status text-secondary";
    label.append(name, status);
    var bar = document.createElement("div");
    bar.className = "progress";
    bar.setAttribute("role", "progressbar");
    bar.setAttribute("aria-label", file.name);
    bar.setAttribute("aria-valuemin", "0");
    bar.setAttribute("aria-valuemax", "100");
    var fill = document.createElement("div");
    fill.className = "progress-bar progress-bar-striped progress-bar-animated";
    fill.style.width = "0%";
    bar.append(fill);
    var message = document.createElement("div");
    message.className = "upload-message small";
    item.append(label, bar, message);
    list.prepend(item);
    return {
      progress: function (sent, total) {
        var pct = total ? Math.floor((sent / total) * 100) : 100;
        fill.style.width = pct + "%";
        fill.textContent = pct + "%";
        bar.setAttribute("aria-valuenow", String(pct));
        status.textContent = data.msgUploading + " " + formatBytes(sent) + " / " + formatBytes(total);
      },
      note: function (text, tone) {
        message.textContent = text;
        message.className = "upload-message small text-" + (tone || "secondary");
      },
      finish: function (ok) {
        fill.classList.remove("progress-bar-animated", "progress-bar-striped");
        fill.classList.add(ok ? "bg-success" : "bg-danger");
        item.classList.add(ok ? "upload-done" : "upload-failed");
        if (ok) status.textContent = data.msgDone + " " + formatBytes(Number(fill.dataset.total || 0));
      },
      fill: fill,
    };
  }

  function refreshListing() {
    if (window.htmx) {
      window.htmx.ajax("GET", data.listingUrl, { target: "#storage-listing", swap: "outerHTML" });
    }
  }

  function start(file) {
    var view = row(file);
    view.fill.dataset.total = String(file.size);
    var upload = new window.tus.Upload(file, {
      endpoint: data.endpoint,
      chunkSize: Number(data.chunkSize),
      retryDelays: [0, 1000, 3000],
      removeFingerprintOnSuccess: true,
      headers: { "X-CSRFToken": data.csrfToken },
      metadata: { filename: file.name, filetype: file.type || "", folder: data.folder },
      onProgress: function (sent, total) { view.progress(sent, total); },
      onAfterResponse: function (req, res) {
        // A HEAD is how a resumed upload learns how much the server already has.
        if (req.getMethod() === "HEAD" && res.getStatus() === 200) {
          var offset = Number(res.getHeader("Upload-Offset") || 0);
          view.note(data.msgResuming + " " + formatBytes(offset), "info");
          view.progress(offset, file.size);
        }
      },
      onSuccess: function () {
        view.progress(file.size, file.size);
        view.finish(true);
        refreshListing();
      },
      onError: function (error) {
        var message = serverMessage(error);
        if (message) {
          view.note(data.msgFailed + ": " + message, "danger");
        } else {
          view.note(data.msgInterrupted, "warning");
        }
        view.finish(false);
        refreshListing();
      },
    });
    upload.findPreviousUploads().then(function (previous) {
      if (previous.length) upload.resumeFromPreviousUpload(previous[0]);
      upload.start();
    });
  }

  input.addEventListener("change", function () {
    Array.prototype.forEach.call(input.files, start);
    input.value = "";
  });
})();
