// The Settings portal's script: the copy buttons, the confirmations, and the
// step from the link's page to Settings. Plain JavaScript, no framework; every
// page works without it (forms submit, secrets can be selected by hand).
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // The link's page: on to Settings (the link is there to follow without script).
  const onward = document.getElementById("continue");
  if (onward) {
    window.location.replace(onward.href);
    return;
  }

  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async () => {
      const field = document.getElementById(button.dataset.copy);
      const status = document.querySelector(`[data-copied-for="${button.dataset.copy}"]`);
      field.select();
      let copied = false;
      try {
        await navigator.clipboard.writeText(field.value);
        copied = true;
      } catch {
        copied = document.execCommand("copy");
      }
      if (status) {
        status.textContent = copied
          ? "Copied to the clipboard."
          : "Could not copy: select the text and copy it by hand.";
      }
      button.textContent = copied ? "Copied" : "Copy";
    });
  }

  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) {
        event.preventDefault();
      }
    });
  }
});
