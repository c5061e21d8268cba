// Builds a JavaScript scenario into a WebAssembly component with ComponentizeJS, through
// its JavaScript API (the `jco componentize` 1.35.0 command line fails here with "failed
// to get path metadata" on the WIT path):
//
//     cd sdk/js && npm install && node build.mjs ../../scenarios/js/long_context.js long_context.wasm
//
// `npm install` installs the versions package-lock.json pins; `npm ci` refuses this lock
// file as out of sync, because some platform packages jco names as optional were never
// published. package.json names @bytecodealliance/preview2-shim as well: ComponentizeJS
// 0.23.0 imports it when it runs but lists it only among its devDependencies.
//
// The packages come from ./node_modules, or from the node_modules directory named by
// COMPONENTIZE_JS_MODULES (the tests install them under target/tmp).

import { readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const wit = join(here, "..", "..", "wit");

/** ComponentizeJS's `componentize`, from a node_modules directory; refuses another
 * version than package.json pins, so a stale install cannot build silently. */
async function componentizeFrom(modules) {
  const dir = join(modules, "@bytecodealliance", "componentize-js");
  const pkg = JSON.parse(await readFile(join(dir, "package.json"), "utf8"));
  const ours = JSON.parse(await readFile(join(here, "package.json"), "utf8"));
  const pinned = ours.dependencies["@bytecodealliance/componentize-js"];
  if (pkg.version !== pinned) {
    throw new Error(`ComponentizeJS ${pkg.version} in ${modules}, but package.json pins ${pinned}: run npm install`);
  }
  return (await import(pathToFileURL(join(dir, pkg.exports.import)).href)).componentize;
}

const [source, output] = process.argv.slice(2);
if (!source || !output) {
  console.error("usage: node build.mjs SCENARIO.js OUTPUT.wasm");
  process.exit(2);
}
const modules = process.env.COMPONENTIZE_JS_MODULES ?? join(here, "node_modules");
const componentize = await componentizeFrom(modules);
const { component } = await componentize({
  sourcePath: resolve(source),
  witPath: wit,
  worldName: "scenario",
  // The sandbox offers no network: leave out the engine's fetch() and its HTTP imports.
  disableFeatures: ["http", "fetch-event"],
});
await writeFile(output, component);
console.log(`wrote ${output} (${component.length} bytes)`);
