// Copies memlint's published JSON Schemas (memlint/schemas/ of the source tree) into the
// extension, so that VS Code validates ds_config*.json and memlint.toml without the network.
'use strict';

const fs = require('fs');
const path = require('path');

const source = path.join(__dirname, '..', '..', '..', 'memlint', 'schemas');
const target = path.join(__dirname, '..', 'schemas');
fs.mkdirSync(target, { recursive: true });
for (const name of ['deepspeed.schema.json', 'memlint.schema.json', 'tool-memlint.schema.json']) {
  fs.copyFileSync(path.join(source, name), path.join(target, name));
}
