// How the extension starts `memlint server` and what it sends it, without the vscode module, so
// that test/drive-server.js starts and talks to the server exactly as the extension does.
'use strict';

const DEFAULTS = { path: 'memlint', set: [], model: '', debounce: 0.3 };

// The languages the client sends to the server: every file family memlint reads.
const DOCUMENT_SELECTOR = [
  { scheme: 'file', language: 'json' },
  { scheme: 'file', language: 'jsonc' },
  { scheme: 'file', language: 'yaml' },
  { scheme: 'file', language: 'toml' },
  { scheme: 'file', language: 'shellscript' },
  { scheme: 'file', pattern: '**/*.{args,slurm,sbatch}' },
  { scheme: 'file', pattern: '**/config_registry*.py' },
];

function settingsFrom(get) {
  const out = {};
  for (const [key, fallback] of Object.entries(DEFAULTS)) {
    const value = get(key);
    out[key] = value === undefined || value === null ? fallback : value;
  }
  return out;
}

function serverCommand(settings) {
  return { command: settings.path || DEFAULTS.path, args: ['server', '--stdio'] };
}

function initializationOptions(settings) {
  const options = { set: settings.set || [], debounce: settings.debounce };
  if (settings.model) {
    options.model = settings.model;
  }
  return options;
}

module.exports = { DEFAULTS, DOCUMENT_SELECTOR, settingsFrom, serverCommand, initializationOptions };
