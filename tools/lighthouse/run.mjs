// One Lighthouse run of one page, in a Chromium of its own (a fresh profile, an empty cache):
//
//   node run.mjs '{"url": "...", "formFactor": "mobile", "output": "report.json", "token": null}'
//
// formFactor is "mobile" (Lighthouse's default: a Moto G Power, slow 4G, 4x CPU slowdown) or
// "desktop" (its desktop preset). With a "token" the page is loaded as that player: the token is
// put in the origin's localStorage first, from an address that loads no asset (/healthz), and
// Lighthouse then keeps the storage (it still starts with an empty cache: the profile is new).
// audit.py calls this once per run; CHROME_PATH names the browser (default /usr/bin/chromium).
// Prints one JSON line: the category scores and the metrics the audit reports.

import fs from "node:fs";
import * as chromeLauncher from "chrome-launcher";
import lighthouse, { desktopConfig } from "lighthouse";
import puppeteer from "puppeteer-core";

const job = JSON.parse(process.argv[2]);
const chromePath = process.env.CHROME_PATH || "/usr/bin/chromium";
const CATEGORIES = ["performance", "accessibility", "best-practices", "seo"];
const METRICS = {
  lcp: "largest-contentful-paint",
  cls: "cumulative-layout-shift",
  tbt: "total-blocking-time",
  fcp: "first-contentful-paint",
  si: "speed-index",
};

const chrome = await chromeLauncher.launch({
  chromePath,
  chromeFlags: ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"],
});
let browser;
try {
  browser = await puppeteer.connect({ browserURL: `http://127.0.0.1:${chrome.port}`, defaultViewport: null });
  const page = await browser.newPage();
  if (job.token) {
    await page.goto(new URL("/healthz", job.url).href);
    await page.evaluate((token) => localStorage.setItem("blackdrez.token", token), job.token);
  }
  const flags = {
    output: "json",
    logLevel: "error",
    onlyCategories: CATEGORIES,
    disableStorageReset: Boolean(job.token),
  };
  const config = job.formFactor === "desktop" ? desktopConfig : undefined;
  const result = await lighthouse(job.url, flags, config, page);
  const lhr = result.lhr;
  if (job.output) fs.writeFileSync(job.output, result.report);
  const summary = {
    url: job.url,
    finalUrl: lhr.finalDisplayedUrl,
    formFactor: job.formFactor,
    scores: Object.fromEntries(CATEGORIES.map((c) => [c, lhr.categories[c]?.score == null ? null : Math.round(lhr.categories[c].score * 100)])),
    metrics: Object.fromEntries(Object.entries(METRICS).map(([k, id]) => [k, lhr.audits[id]?.numericValue ?? null])),
    runtimeError: lhr.runtimeError?.message ?? null,
    warnings: lhr.runWarnings,
    // What costs points: every audit of a category that did not pass in full (weight > 0),
    // and the diagnostics that name the LCP element and the layout shifts.
    failing: CATEGORIES.flatMap((c) => (lhr.categories[c]?.auditRefs ?? [])
      .filter((ref) => lhr.audits[ref.id]?.score !== null && lhr.audits[ref.id]?.score < 1
        && (ref.weight > 0 || lhr.audits[ref.id]?.details?.type === "opportunity"))
      .map((ref) => ({ category: c, id: ref.id, score: lhr.audits[ref.id].score, value: lhr.audits[ref.id].displayValue ?? null }))),
  };
  console.log(JSON.stringify(summary));
} finally {
  if (browser) await browser.disconnect();
  await chrome.kill();
}
