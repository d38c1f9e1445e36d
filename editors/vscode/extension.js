// The memlint VS Code extension: starts `memlint server` (memlint's Language Server) for the
// training configs memlint reads. Diagnostics, hovers and quick fixes come from the server.
'use strict';

const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');
const settings = require('./lib/settings');

let client;

function current() {
  const config = vscode.workspace.getConfiguration('memlint');
  return settings.settingsFrom((key) => config.get(key));
}

async function start() {
  const now = current();
  const run = settings.serverCommand(now);
  client = new LanguageClient('memlint', 'memlint', { run, debug: run }, {
    documentSelector: settings.DOCUMENT_SELECTOR,
    initializationOptions: settings.initializationOptions(now),
  });
  await client.start();
}

async function activate(context) {
  await start();
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration(async (event) => {
    if (event.affectsConfiguration('memlint') && client) {
      await client.stop();
      await start();
    }
  }));
}

async function deactivate() {
  if (client) {
    await client.stop();
  }
}

module.exports = { activate, deactivate };
