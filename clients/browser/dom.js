// A few DOM helpers: build elements from plain data, swap a region's content keeping focus.

/**
 * h("button#hit.primary", {onclick, disabled: true, dataset: {key: "hit"}}, "Hit")
 * Attributes: on* are listeners, "class"/"dataset"/"style" are merged, false/null are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const [head, ...classes] = tag.split(".");
  const [name, id] = head.split("#");
  const node = document.createElement(name || "div");
  if (id) node.id = id;
  if (classes.length) node.className = classes.join(" ");
  if (attrs === null || typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs)) {
    children.unshift(attrs);
    attrs = {};
  }
  for (const [key, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "class") node.classList.add(...String(value).split(/\s+/).filter(Boolean));
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "style" && typeof value === "object") {
      for (const [name, v] of Object.entries(value)) node.style.setProperty(name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`), v);
    }
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child instanceof Node ? child : String(child));
  }
}

/** Replace ``region``'s children, giving focus back to the element with the same data-key and
 * keeping each keyed <details> open or closed as the user left it. */
export function swap(region, ...children) {
  const active = document.activeElement;
  const key = active && region.contains(active) ? active.dataset.key : undefined;
  const folds = new Map([...region.querySelectorAll("details[data-key]")].map((d) => [d.dataset.key, d.open]));
  region.replaceChildren();
  append(region, children);
  for (const details of region.querySelectorAll("details[data-key]")) {
    const open = folds.get(details.dataset.key);
    if (open !== undefined) details.open = open;
  }
  if (key) {
    const again = region.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (again && !again.disabled) again.focus({ preventScroll: true });
  }
}

const ARROWS = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };

/** Arrow keys move the focus among the ``selector`` elements of ``root`` as they lie on screen:
 * to the nearest one in the arrow's direction (a board of piles: rows, columns). From outside
 * them, the first. Returns whether the key was an arrow (handled). */
export function arrowFocus(event, root, selector) {
  const direction = ARROWS[event.key];
  if (!direction || event.shiftKey) return false;
  const items = [...root.querySelectorAll(selector)].filter((e) => !e.disabled && e.getClientRects().length);
  const from = document.activeElement?.closest?.(selector);
  if (!from || !items.includes(from)) {
    items[0]?.focus();
    return true;
  }
  const middle = (e) => { const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; };
  const [x, y] = middle(from);
  const [dx, dy] = direction;
  let best = null;
  let bestScore = Infinity;
  for (const item of items) {
    if (item === from) continue;
    const [ix, iy] = middle(item);
    const along = (ix - x) * dx + (iy - y) * dy; // how far in the arrow's direction
    if (along <= 1) continue;
    const aside = Math.abs((ix - x) * dy) + Math.abs((iy - y) * dx); // how far off its line
    const score = along + 3 * aside;
    if (score < bestScore) { bestScore = score; best = item; }
  }
  best?.focus();
  return true;
}

/** A short, human form of a hex commitment or seed. */
export function short(text, size = 12) {
  return text && text.length > size ? `${text.slice(0, size)}…` : text || "";
}
