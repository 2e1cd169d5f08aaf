// Drives the official @anthropic-ai/sdk against an Interlingua instance:
// INTERLINGUA_URL is its base URL, INTERLINGUA_KEY an API key it takes.
// Prints one JSON object: what the client read in each scenario.
import Anthropic from '@anthropic-ai/sdk';

const baseURL = process.env.INTERLINGUA_URL;
const key = process.env.INTERLINGUA_KEY;
const client = new Anthropic({ baseURL, apiKey: key, maxRetries: 0 });
const bearer = new Anthropic({ baseURL, apiKey: null, authToken: key, maxRetries: 0 });
const user = (text) => [{ role: 'user', content: text }];

// streamed runs messages.stream and records the event types, the
// text, thinking and input_json fragments, the usage message_start
// gave (what a client shows before the answer), and the final message.
async function streamed(c, params) {
  const stream = c.messages.stream(params);
  const events = [];
  const partialJSON = [];
  let text = '';
  let startUsage = null;
  stream.on('text', (t) => { text += t; });
  stream.on('streamEvent', (ev) => {
    events.push(ev.type + (ev.delta?.type ? ':' + ev.delta.type : '') + (ev.content_block ? ':' + ev.content_block.type : ''));
    if (ev.delta?.type === 'input_json_delta') partialJSON.push(ev.delta.partial_json);
    if (ev.type === 'message_start') startUsage = { ...ev.message.usage };
  });
  const final = await stream.finalMessage();
  return { events, text, partialJSON, startUsage, final: strip(final) };
}

// strip drops the ids that change per run.
function strip(m) {
  return { ...m, id: m.id.startsWith('msg_') ? 'msg_X' : m.id };
}

async function failure(fn) {
  try {
    const r = await fn();
    return { unexpected: r };
  } catch (e) {
    return { name: e.constructor.name, status: e.status ?? null, type: e.error?.error?.type ?? e.error?.type ?? null, message: e.error?.error?.message ?? e.message };
  }
}

const out = {};
out.streamText = await streamed(client, { model: 'echo', max_tokens: 64, messages: user('hello from the sdk') });
out.create = strip(await client.messages.create({ model: 'echo', max_tokens: 64, system: 'be brief', messages: user('non streaming') }));
out.bearer = strip(await bearer.messages.create({ model: 'echo', max_tokens: 8, messages: user('bearer works') }));
out.agentTool = await streamed(client, { model: 'demo-agent', max_tokens: 64, messages: user('what is 6*7?') });
out.peerTools = await streamed(client, {
  model: 'peer-tools', max_tokens: 256, messages: user('weather and time?'),
  tools: [{ name: 'get_weather', description: 'weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
    { name: 'get_time', input_schema: { type: 'object' } }],
  tool_choice: { type: 'auto' },
});
out.peerThinking = await streamed(client, {
  model: 'peer-thinking', max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 2048 }, messages: user('27 * 453?'),
});
// The next turn sends the signed thinking back, with the tool result.
out.peerThinkingCreate = strip(await client.messages.create({ model: 'peer-thinking', max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 2048 }, messages: user('again') }));
out.peerUsage = await streamed(client, { model: 'peer-usage', max_tokens: 64, messages: user('count me') });
out.errorBefore = await failure(() => client.messages.create({ model: 'echo', max_tokens: 8, messages: user('x'), fail_after: 0, fail_code: 'resource_exhausted', fail_message: 'quota' }));
out.errorAfter = await failure(() => streamed(client, { model: 'stream', max_tokens: 8, messages: user('x'), fail_after: 2, fail_code: 'unavailable', fail_message: 'went away' }));
out.peerErrorMid = await failure(() => streamed(client, { model: 'peer-error', max_tokens: 8, messages: user('x') }));
out.unknownModel = await failure(() => client.messages.create({ model: 'no-such-model', max_tokens: 8, messages: user('x') }));
out.badRequest = await failure(() => client.messages.create({ model: 'echo', messages: user('x') }));
out.countTokens = await failure(() => client.messages.countTokens({ model: 'echo', messages: user('x') }));
console.log(JSON.stringify(out, null, 1));
