// The official openai npm client against an Interlingua instance at
// $INTERLINGUA_URL (key $INTERLINGUA_KEY); targets: the scripted backend's
// echo and demo-agent, and the reference peer's vllm-tools (parallel tool
// calls, reasoning) and hang (behind a backend of type openai).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.INTERLINGUA_URL + '/v1', apiKey: process.env.INTERLINGUA_KEY, maxRetries: 0 });
const user = (content) => [{ role: 'user', content }];

test('streamed text with the usage chunk', async () => {
  const stream = await client.chat.completions.create({ model: 'echo', stream: true, stream_options: { include_usage: true }, messages: user('hello from node') });
  let text = '', finish = null, usage = null, last = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.choices.length > 0) {
      text += chunk.choices[0].delta.content ?? '';
      finish = chunk.choices[0].finish_reason ?? finish;
    } else {
      usage = chunk.usage;
    }
    last = chunk;
  }
  assert.equal(text, 'hello from node');
  assert.equal(finish, 'stop');
  assert.equal(usage.completion_tokens, 3);
  assert.deepEqual(last.choices, []);
});

test('not streamed', async () => {
  const c = await client.chat.completions.create({ model: 'echo', messages: [{ role: 'system', content: 'be brief' }, ...user('plain answer')] });
  assert.equal(c.object, 'chat.completion');
  assert.equal(c.choices[0].message.content, 'plain answer');
  assert.equal(c.choices[0].finish_reason, 'stop');
});

test('the stream helper accumulates parallel tool calls and reasoning', async () => {
  const stream = client.chat.completions.stream({ model: 'vllm-tools', messages: user('weather and time?'),
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }, { type: 'function', function: { name: 'get_time', parameters: { type: 'object' } } }] });
  let reasoning = '';
  for await (const chunk of stream) {
    reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
  }
  const final = await stream.finalChatCompletion();
  const msg = final.choices[0].message;
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(reasoning, 'Need weather.');
  assert.deepEqual(msg.tool_calls.map((c) => [c.id, c.function.name, JSON.parse(c.function.arguments)]),
    [['chatcmpl-tool-1', 'get_weather', { city: 'Paris' }], ['chatcmpl-tool-2', 'get_time', { tz: 'CET' }]]);
});

test('a tool round trip: the assistant calls and the tool result are sent back', async () => {
  const c = await client.chat.completions.create({ model: 'echo', messages: [
    ...user('first'),
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_A', type: 'function', function: { name: 'f', arguments: '{}' } }] },
    { role: 'tool', tool_call_id: 'call_A', content: '15C' },
    ...user('second question') ] });
  assert.equal(c.choices[0].message.content, 'second question');
});

test('an error after the first chunk is thrown, not a finish', async () => {
  const stream = await client.chat.completions.create({ model: 'echo', stream: true, messages: user('one two three'),
    fail_after: 1, fail_code: 'unavailable', fail_message: 'went away' });
  let text = '';
  await assert.rejects(async () => {
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      assert.equal(chunk.choices[0]?.finish_reason ?? null, null);
    }
  }, (err) => err instanceof OpenAI.APIError && /went away/.test(err.message));
  assert.equal(text, 'one');
});

test('an error before the first chunk has its status', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'echo', stream: true, messages: user('x'),
    fail_after: 0, fail_code: 'resource_exhausted', fail_message: 'quota' }),
  (err) => err instanceof OpenAI.RateLimitError && err.status === 429);
});

test('unknown model and bad input', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'gpt-9', messages: user('x') }),
    (err) => err instanceof OpenAI.NotFoundError && err.code === 'model_not_found');
  await assert.rejects(client.chat.completions.create({ model: 'echo', messages: user('x'), temperature: 'hot' }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'temperature');
  await assert.rejects(client.chat.completions.create({ model: 'echo', messages: user('x'), n: 2 }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'n');
});

test('a wrong key is refused', async () => {
  const bad = new OpenAI({ baseURL: process.env.INTERLINGUA_URL + '/v1', apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: 'echo', messages: user('x') }),
    (err) => err instanceof OpenAI.AuthenticationError && err.code === 'invalid_api_key');
});

test('models list and retrieve', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes('echo') && ids.includes('vllm-tools'), ids.join(','));
  const m = await client.models.retrieve('echo');
  assert.equal(m.owned_by, 'interlingua');
  await assert.rejects(client.models.retrieve('nope'), (err) => err instanceof OpenAI.NotFoundError);
});

test('cancel: aborting the stream ends the iteration and the request', async () => {
  // openai-node's Stream ends its iteration quietly on an abort.
  const ac = new AbortController();
  const stream = await client.chat.completions.create({ model: 'hang', stream: true, messages: user('x') }, { signal: ac.signal });
  let text = '';
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (text) ac.abort();
  }
  assert.equal(text, 'first');
  assert.ok(ac.signal.aborted);
});
