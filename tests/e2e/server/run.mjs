// Runs every *.test.mjs here with node's test runner, one file at a time (each starts its own
// servers). CTest's e2e_server runs this; `npm test` too. Fails at once, saying what to do, when
// the npm packages (package-lock.json) are not installed.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
if (!existsSync(path.join(here, 'node_modules', 'openai', 'package.json'))) {
  console.error(
    `e2e_server: ${path.join(here, 'node_modules')} is missing (the openai package is not installed).\n` +
      `Run scripts/setup.sh, or: (cd ${here} && npm ci --no-audit --no-fund)`,
  );
  process.exit(1);
}

// Files to run: the arguments (e.g. `node run.mjs load.test.mjs`), else every *.test.mjs.
const files = process.argv.slice(2).length
  ? process.argv.slice(2)
  : readdirSync(here)
      .filter((f) => f.endsWith('.test.mjs'))
      .sort();
const [major, minor] = process.versions.node.split('.').map(Number);
// --test-concurrency: Node 20.10 and later. Older ones (Debian 12 ships 18) run file by file.
const hasConcurrency = major > 20 || (major === 20 && minor >= 10);
const reporter = ['--test-reporter=spec'];
const t0 = Date.now();
let status = 0;
if (hasConcurrency) {
  status = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...reporter, ...files], { cwd: here, stdio: 'inherit' }).status ?? 1;
} else {
  for (const f of files) {
    const s = spawnSync(process.execPath, ['--test', ...reporter, f], { cwd: here, stdio: 'inherit' }).status ?? 1;
    if (s !== 0) status = s;
  }
}
console.error(`e2e_server: ${files.length} files in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${status === 0 ? 'passed' : 'FAILED'}`);
process.exit(status);
