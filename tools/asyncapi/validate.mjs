// Validate an AsyncAPI document with AsyncAPI's own parser: prints each diagnostic and exits 1
// if any is an error (severity 0), 0 otherwise. Usage: node validate.mjs FILE
import { readFile } from "node:fs/promises";
import { Parser } from "@asyncapi/parser";

const file = process.argv[2];
const parser = new Parser();
const { document, diagnostics } = await parser.parse(await readFile(file, "utf8"));
const severity = ["error", "warning", "information", "hint"];
for (const d of diagnostics) {
  console.log(`${severity[d.severity] ?? d.severity}: ${d.code}: ${d.message} at ${d.path.join(".")}`);
}
const errors = diagnostics.filter((d) => d.severity === 0);
if (!document || errors.length) {
  console.log(`${errors.length} error(s)`);
  process.exit(1);
}
const ops = document.operations().all().length;
const messages = document.allMessages().all().length;
console.log(`valid AsyncAPI ${document.version()}: ${ops} operations, ${messages} messages`);
