// The player's preferences (theme, sound on your turn), kept in localStorage, and the signals
// that it is your turn: the tab's title and icon, and an optional short sound (off by default).

const THEME_KEY = "blackdrez.theme";
const SOUND_KEY = "blackdrez.sound";
export const THEMES = [["auto", "Theme: as the system"], ["light", "Theme: light"], ["dark", "Theme: dark"], ["contrast", "Theme: high contrast"]];

export function theme() { return localStorage.getItem(THEME_KEY) || "auto"; }

/** Apply and remember a theme ("auto" follows the system's light or dark setting). */
export function setTheme(value) {
  localStorage.setItem(THEME_KEY, value);
  applyTheme();
}

export function applyTheme() {
  const value = theme();
  const dark = value === "dark" || (value === "auto" && matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.dataset.theme = value === "contrast" ? "contrast" : dark ? "dark" : "light";
}

export function soundOn() { return localStorage.getItem(SOUND_KEY) === "1"; }
export function setSound(on) { localStorage.setItem(SOUND_KEY, on ? "1" : "0"); }

/** Whether animations should play (the system's "reduce motion" setting says no). */
export function motionAllowed() {
  return !matchMedia("(prefers-reduced-motion: reduce)").matches;
}

const BASE_TITLE = "BlackDrez";
const ICON = (fill) => "data:image/svg+xml," + encodeURIComponent(
  `<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'><rect width='16' height='16' rx='3' fill='${fill}'/>` +
  "<text x='8' y='12.5' font-size='12' text-anchor='middle' fill='white'>♛</text></svg>");
const ICONS = { idle: ICON("#1b5e3b"), turn: ICON("#d08a00") };

let onTurn = false;
let audio = null;

/** Show (or stop showing) that it is the player's turn: tab title and icon, and the sound
 * once when the turn begins, if the player switched it on. */
export function signalTurn(mine, place = "") {
  const title = mine ? `● Your turn · ${BASE_TITLE}` : place ? `${place} · ${BASE_TITLE}` : BASE_TITLE;
  if (document.title !== title) document.title = title;
  const icon = document.querySelector("link[rel=icon]");
  const href = mine ? ICONS.turn : ICONS.idle;
  if (icon && icon.getAttribute("href") !== href) icon.setAttribute("href", href);
  if (mine && !onTurn && soundOn()) chime();
  onTurn = mine;
}

/** Two short soft notes (Web Audio: no sound file to fetch). */
function chime() {
  try {
    audio = audio || new AudioContext();
    const now = audio.currentTime;
    for (const [i, frequency] of [660, 880].entries()) {
      const tone = audio.createOscillator();
      const gain = audio.createGain();
      tone.frequency.value = frequency;
      gain.gain.setValueAtTime(0.0001, now + i * 0.12);
      gain.gain.exponentialRampToValueAtTime(0.12, now + i * 0.12 + 0.02);
      gain.gain.exponentialRampToValueAtTime(0.0001, now + i * 0.12 + 0.25);
      tone.connect(gain).connect(audio.destination);
      tone.start(now + i * 0.12);
      tone.stop(now + i * 0.12 + 0.3);
    }
  } catch { /* no audio here: the title and icon still say it */ }
}
