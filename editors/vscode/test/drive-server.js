// Drives `memlint server` the way the extension does (lib/settings.js: the same command, document
// languages and initializationOptions; vscode-languageclient's JSON-RPC framing over stdio):
// initialize, didOpen of a DeepSpeed config with a typo, diagnostics, hover, the quick fix,
// shutdown. Needs only Node and memlint (with the lsp extra); no VS Code.
//
//   node test/drive-server.js [MEMLINT_COMMAND]     (default: the memlint.path setting's default)
//
// Exit 0 when every check holds; prints what failed otherwise.
'use strict';

const assert = require('assert');
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { pathToFileURL } = require('url');
const settings = require('../lib/settings');

const CONFIG = '{\n  "train_micro_batch_size_per_gpu": 4,\n  "gradient_accumulation_steps": 1,\n' +
  '  "bf16": {"enabled": true},\n  "zero_optimisation": {"stage": 1}\n}\n';
const RUN = 'files = ["ds_config.json"]\nmodel = "llama3-8b"\ngpu = "H100-80GB"\n' +
  'world_size = 8\nseq_len = 4096\nrecompute = "selective"\n';

function project() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'memlint-vscode-'));
  fs.mkdirSync(path.join(root, '.git'));
  fs.writeFileSync(path.join(root, 'memlint.toml'), RUN);
  fs.writeFileSync(path.join(root, 'ds_config.json'), CONFIG);
  return root;
}

class Connection {
  constructor(child) {
    this.child = child;
    this.buffer = Buffer.alloc(0);
    this.waiting = [];
    this.inbox = [];
    this.nextId = 1;
    child.stdout.on('data', (chunk) => this.receive(chunk));
  }

  receive(chunk) {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/Content-Length: (\d+)/i.exec(this.buffer.slice(0, end).toString())[1]);
      if (this.buffer.length < end + 4 + length) return;
      const message = JSON.parse(this.buffer.slice(end + 4, end + 4 + length).toString('utf8'));
      this.buffer = this.buffer.slice(end + 4 + length);
      this.inbox.push(message);
      this.deliver();
    }
  }

  deliver() {
    for (const waiter of [...this.waiting]) {
      const index = this.inbox.findIndex(waiter.wanted);
      if (index >= 0) {
        const [message] = this.inbox.splice(index, 1);
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        clearTimeout(waiter.timer);
        waiter.resolve(message);
      }
    }
  }

  wait(wanted, what, timeout = 120000) {
    return new Promise((resolve, reject) => {
      const waiter = { wanted, resolve };
      waiter.timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeout);
      this.waiting.push(waiter);
      this.deliver();
    });
  }

  send(message) {
    const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...message }), 'utf8');
    this.child.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
    this.child.stdin.write(body);
  }

  notify(method, params) {
    this.send({ method, params });
  }

  async request(method, params) {
    const id = this.nextId++;
    this.send({ id, method, params });
    const reply = await this.wait((m) => m.id === id && !m.method, method);
    if (reply.error) throw new Error(`${method}: ${JSON.stringify(reply.error)}`);
    return reply.result;
  }

  diagnostics(uri, version) {
    return this.wait((m) => m.method === 'textDocument/publishDiagnostics' &&
      m.params.uri === uri && m.params.version === version, `diagnostics of version ${version}`)
      .then((m) => m.params.diagnostics);
  }
}

async function main() {
  const chosen = { ...settings.DEFAULTS, debounce: 0.05 };
  if (process.argv[2]) chosen.path = process.argv[2];
  const command = settings.serverCommand(chosen);
  const root = project();
  const uri = pathToFileURL(path.join(root, 'ds_config.json')).href;
  const words = command.command.split(' ');   // "python -m memlint" from a test, else one word
  const child = spawn(words[0], [...words.slice(1), ...command.args], { cwd: root });
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const server = new Connection(child);
  try {
    const init = await server.request('initialize', {
      processId: process.pid, rootUri: pathToFileURL(root).href, capabilities: {},
      initializationOptions: settings.initializationOptions(chosen) });
    assert.ok(init.capabilities.hoverProvider, 'hover');
    assert.ok(init.capabilities.codeActionProvider, 'code actions');
    server.notify('initialized', {});
    assert.ok(settings.DOCUMENT_SELECTOR.some((s) => s.language === 'json'));
    server.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'json', version: 1,
      text: CONFIG } });
    const diagnostics = await server.diagnostics(uri, 1);
    const typo = diagnostics.find((d) => d.code === 'ML003');
    assert.ok(typo, `an ML003 diagnostic in ${JSON.stringify(diagnostics)}`);
    assert.strictEqual(typo.range.start.line, 4);
    const hover = await server.request('textDocument/hover', { textDocument: { uri },
      position: { line: 1, character: 5 } });
    assert.match(hover.contents.value, /micro_batch = 4.*GiB of 80\.0 GiB/);
    const actions = await server.request('textDocument/codeAction', { textDocument: { uri },
      range: typo.range, context: { diagnostics: [typo] } });
    const rename = actions.find((a) => a.title.startsWith('Rename'));
    assert.strictEqual(rename.edit.changes[uri][0].newText, 'zero_optimization');
    server.notify('textDocument/didChange', { textDocument: { uri, version: 2 },
      contentChanges: [{ range: rename.edit.changes[uri][0].range, text: 'zero_optimization' }] });
    const fixed = await server.diagnostics(uri, 2);
    assert.ok(!fixed.some((d) => d.code === 'ML003'), 'the fix removes the diagnostic');
    await server.request('shutdown', null);
    server.notify('exit', null);
    const code = await new Promise((resolve) => child.on('exit', resolve));
    assert.strictEqual(code, 0, 'exit code');
    console.log(`memlint server: ${diagnostics.length} diagnostics, hover, quick fix, shutdown: ok`);
  } catch (error) {
    child.kill();
    console.error(`${error.message}\n${stderr.slice(-2000)}`);
    process.exitCode = 1;
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

main();
