// Builds the web page into one folder of the files CMake embeds in the binary:
// index.html and icon.svg (copied), app.js (src/app.js and its imports, bundled and minified), app.css.
// Usage: node build.mjs --outdir DIR
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const i = process.argv.indexOf('--outdir');
if (i < 0 || !process.argv[i + 1]) {
  console.error('usage: node build.mjs --outdir DIR');
  process.exit(2);
}
const outdir = path.resolve(process.argv[i + 1]);
mkdirSync(outdir, { recursive: true });

const common = { bundle: true, minify: true, legalComments: 'none', logLevel: 'warning', target: ['es2020', 'chrome100', 'firefox100', 'safari15'] };
await build({ ...common, entryPoints: [path.join(here, 'src/app.js')], outfile: path.join(outdir, 'app.js'), format: 'iife' });
await build({ ...common, entryPoints: [path.join(here, 'src/style.css')], outfile: path.join(outdir, 'app.css') });
for (const f of ['index.html', 'icon.svg']) copyFileSync(path.join(here, 'src', f), path.join(outdir, f));
