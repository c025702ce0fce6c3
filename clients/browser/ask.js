// Questions asked in the page (a modal <dialog>), not with the browser's confirm(): styled as
// the rest, readable on a phone, saying what each answer does, and never blocking the page's
// own work (updates keep arriving while it is open).

import { h } from "./dom.js";

let open = null; // the question on screen: a new one replaces it (answered "no")

/**
 * Ask ``question`` (a title and a sentence); resolve true when the player presses ``yes``,
 * false for ``no``, Escape or a click beside the dialog.
 * ask({ title: "Resign?", text: "Your score stays as it is now.", yes: "Resign", no: "Play on" })
 */
export function ask({ title, text, yes = "Yes", no = "Cancel", danger = false }) {
  open?.close("no");
  const dialog = h("dialog.ask", { "aria-labelledby": "ask-title", "aria-describedby": "ask-text" },
    h("form", { method: "dialog" },
      h("h2#ask-title", title),
      h("p#ask-text", text),
      h("div.ask-buttons",
        h("button", { value: "no", id: "ask-no", autofocus: true }, no),
        h("button", { value: "yes", id: "ask-yes", class: danger ? "danger" : "primary" }, yes))));
  document.body.append(dialog);
  open = dialog;
  dialog.addEventListener("click", (event) => {
    if (event.target === dialog) dialog.close("no"); // the backdrop, beside the form
  });
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      if (open === dialog) open = null;
      dialog.remove();
      resolve(dialog.returnValue === "yes");
    });
    dialog.showModal();
  });
}

/**
 * Ask for a short text (``label`` names the field, at most ``maxlength`` characters, it may be
 * left empty); resolve with the text when the player presses ``yes``, null for ``no``, Escape or
 * a click beside the dialog.
 */
export function askText({ title, text, label, yes = "Send", no = "Cancel", maxlength = 200 }) {
  open?.close("no");
  const field = h("input#ask-field", { type: "text", maxlength, autocomplete: "off" });
  const dialog = h("dialog.ask", { "aria-labelledby": "ask-title", "aria-describedby": "ask-text" },
    h("form", { method: "dialog" },
      h("h2#ask-title", title),
      h("p#ask-text", text),
      h("label.ask-field", { for: "ask-field" }, label),
      field,
      h("div.ask-buttons",
        h("button", { value: "no", id: "ask-no" }, no),
        h("button", { value: "yes", id: "ask-yes", class: "primary" }, yes))));
  document.body.append(dialog);
  open = dialog;
  dialog.addEventListener("click", (event) => {
    if (event.target === dialog) dialog.close("no");
  });
  // Enter in the field answers yes (a form's implicit submission would take the first button).
  field.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); dialog.close("yes"); }
  });
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      if (open === dialog) open = null;
      dialog.remove();
      resolve(dialog.returnValue === "yes" ? field.value.trim() : null);
    });
    dialog.showModal();
    field.focus();
  });
}
