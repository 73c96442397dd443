#!/usr/bin/env node
// client.mjs drives an MCP server with the official TypeScript SDK client,
// v1 (@modelcontextprotocol/sdk) or v2 (@modelcontextprotocol/client), and
// prints what the server answered. It asserts nothing: the Go tests in ..
// hold every client to the same checks.
//
//   node client.mjs --sdk v1|v2 --transport http --url http://127.0.0.1:PORT/ < plan.json
//   node client.mjs --sdk v1|v2 --transport stdio -- SERVER [ARGS...] < plan.json
//
// Options: --negotiation legacy|auto|pin:VERSION (v2 only:
// ClientOptions.versionNegotiation, pin:2026-07-28 being { mode: { pin:
// '2026-07-28' } }; the default is the client's own, legacy); --timeout MS
// (the request timeout of each call; the default is the SDK's, 60 s).
//
// The plan (stdin) is {"sessions": [{"steps": [STEP, ...]}, ...]}. Each
// session is a new connection (over stdio, a new server process), opened
// after the previous one closed. A STEP is
//   {"id": "...", "op": "list"}
//   {"id": "...", "op": "call", "name": "...", "arguments": {...}, "meta": {...}, "parallel": N}
//   {"id": "...", "op": "listen"}
// Steps of a session run in order; "listen" (v2, protocol 2026-07-28 only)
// opens a subscriptions/listen stream for tool list changes, as Claude Code
// does, and keeps it open until the session ends; "meta" is the request's _meta; a call
// with "parallel": N sends N copies at once.
//
// Stdout is one JSON object: {"sdk", "transport", "steps": {ID: OUTCOME}},
// where OUTCOME is {"tools": [...]} for a list, {"result": {...}} for a call,
// {"results": [OUTCOME, ...]} for a parallel call, or {"error": {"message",
// "code", "data"}} when the client threw.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: opts, positionals } = parseArgs({
  options: {
    sdk: { type: 'string' },
    transport: { type: 'string' },
    url: { type: 'string' },
    negotiation: { type: 'string' },
    timeout: { type: 'string' },
  },
  allowPositionals: true,
});

async function loadSDK(sdk) {
  switch (sdk) {
    case 'v1': {
      const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
      const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
      const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
      return {
        Client, StdioClientTransport, StreamableHTTPClientTransport,
        clientOptions: { capabilities: {} },
        call: (c, params, options) => c.callTool(params, undefined, options),
      };
    }
    case 'v2': {
      const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
      const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
      const clientOptions = { capabilities: {} };
      if (opts.negotiation?.startsWith('pin:')) {
        clientOptions.versionNegotiation = { mode: { pin: opts.negotiation.slice('pin:'.length) } };
      } else if (opts.negotiation) {
        clientOptions.versionNegotiation = { mode: opts.negotiation };
      }
      return {
        Client, StdioClientTransport, StreamableHTTPClientTransport, clientOptions,
        call: (c, params, options) => c.callTool(params, options),
      };
    }
    default:
      throw new Error(`--sdk must be v1 or v2, not ${sdk}`);
  }
}

function newTransport(api) {
  switch (opts.transport) {
    case 'http':
      if (!opts.url) throw new Error('--transport http needs --url');
      return new api.StreamableHTTPClientTransport(new URL(opts.url));
    case 'stdio':
      if (positionals.length === 0) throw new Error('--transport stdio needs the server command after --');
      return new api.StdioClientTransport({
        command: positionals[0],
        args: positionals.slice(1),
        env: { ...process.env },
        stderr: 'inherit',
      });
    default:
      throw new Error(`--transport must be stdio or http, not ${opts.transport}`);
  }
}

function errorOf(err) {
  const out = { message: String(err?.message ?? err) };
  if (err?.code !== undefined) out.code = err.code;
  if (err?.data !== undefined) out.data = err.data;
  return out;
}

async function runStep(api, client, step, subscriptions) {
  switch (step.op) {
    case 'listen':
      try {
        subscriptions.push(await client.listen({ toolsListChanged: true }));
        return {};
      } catch (err) {
        return { error: errorOf(err) };
      }
    case 'list':
      try {
        const res = await client.listTools();
        return { tools: res.tools };
      } catch (err) {
        return { error: errorOf(err) };
      }
    case 'call': {
      const params = { name: step.name, arguments: step.arguments ?? {} };
      if (step.meta) params._meta = step.meta;
      const once = async () => {
        try {
          const options = opts.timeout ? { timeout: Number(opts.timeout) } : undefined;
          return { result: await api.call(client, params, options) };
        } catch (err) {
          return { error: errorOf(err) };
        }
      };
      if (step.parallel > 0) {
        const results = await Promise.all(Array.from({ length: step.parallel }, once));
        return { results };
      }
      return once();
    }
    default:
      return { error: { message: `unknown op ${step.op}` } };
  }
}

async function main() {
  const api = await loadSDK(opts.sdk);
  const plan = JSON.parse(readFileSync(0, 'utf8'));
  const steps = {};
  for (const session of plan.sessions) {
    const client = new api.Client({ name: `idemkit-interop-${opts.sdk}`, version: '0.0.0' }, api.clientOptions);
    try {
      await client.connect(newTransport(api));
    } catch (err) {
      for (const step of session.steps) {
        steps[step.id] = { error: { ...errorOf(err), message: `connect: ${errorOf(err).message}` } };
      }
      await client.close().catch(() => {});
      continue;
    }
    const subscriptions = [];
    for (const step of session.steps) {
      steps[step.id] = await runStep(api, client, step, subscriptions);
    }
    for (const sub of subscriptions) {
      await sub.close().catch(() => {});
    }
    await client.close().catch(() => {});
  }
  process.stdout.write(JSON.stringify({ sdk: opts.sdk, transport: opts.transport, steps }) + '\n');
}

main().catch((err) => {
  process.stderr.write(`client.mjs: ${err?.stack ?? err}\n`);
  process.exit(2);
});
