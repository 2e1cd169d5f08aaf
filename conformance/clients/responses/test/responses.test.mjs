// The official openai npm client against an Interlingua instance at
// $INTERLINGUA_URL (adapters/responses TestNodeSDK starts it): target
// "echo" is the scripted echo, "gpt-test" a responses backend whose
// upstream answers "echo: <last user text>" or, offered tools, calls
// get_weather. $INTERLINGUA_KEY and $INTERLINGUA_OTHER_KEY are two API keys.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const base = process.env.INTERLINGUA_URL + '/v1';
const client = new OpenAI({ baseURL: base, apiKey: process.env.INTERLINGUA_KEY, maxRetries: 0 });
const other = new OpenAI({ baseURL: base, apiKey: process.env.INTERLINGUA_OTHER_KEY, maxRetries: 0 });

const tools = [{
  type: 'function', name: 'get_weather', description: 'Weather of a city', strict: false,
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];

test('responses.create, not streamed', async () => {
  const r = await client.responses.create({ model: 'echo', input: 'hello there' });
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'completed');
  assert.match(r.id, /^resp_/);
  assert.equal(r.output_text, 'hello there');
  assert.equal(r.output[0].type, 'message');
  assert.match(r.output[0].id, /^msg_/);
  assert.ok(r.usage && typeof r.usage.output_tokens === 'number');
});

test('responses.create, streamed: numbered events in order', async () => {
  const stream = await client.responses.create({ model: 'echo', input: 'stream me please', stream: true });
  const types = [];
  let seq = 0;
  let text = '';
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, seq++);
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
  }
  assert.equal(text, 'stream me please');
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
  assert.equal(types.at(-1), 'response.completed');
});

test('responses.stream helper: finalResponse and text events', async () => {
  let deltas = '';
  const stream = client.responses.stream({ model: 'gpt-test', input: 'helper' });
  stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
  const final = await stream.finalResponse();
  assert.equal(final.output_text, 'echo: helper');
  assert.equal(deltas, 'echo: helper');
  assert.equal(final.status, 'completed');
});

test('retrieve, multi-turn with previous_response_id, delete', async () => {
  const first = await client.responses.create({ model: 'gpt-test', input: 'first turn' });
  const got = await client.responses.retrieve(first.id);
  assert.equal(got.id, first.id);
  assert.equal(got.output_text, 'echo: first turn');
  const second = await client.responses.create({ model: 'gpt-test', input: 'second turn', previous_response_id: first.id });
  assert.equal(second.previous_response_id, first.id);
  assert.equal(second.output_text, 'echo: second turn');
  const items = await client.responses.inputItems.list(second.id);
  assert.equal(items.data.length, 1);
  await client.responses.delete(first.id);
  await assert.rejects(client.responses.retrieve(first.id), (e) => e.status === 404);
});

test('function calling round trip', async () => {
  const call = await client.responses.create({ model: 'gpt-test', input: 'weather in Paris?', tools });
  const fc = call.output.find((o) => o.type === 'function_call');
  assert.ok(fc, JSON.stringify(call.output));
  assert.equal(fc.name, 'get_weather');
  assert.deepEqual(JSON.parse(fc.arguments), { city: 'Paris' });
  const answer = await client.responses.create({
    model: 'gpt-test', tools, previous_response_id: call.id,
    input: [{ type: 'function_call_output', call_id: fc.call_id, output: '15C' }],
  });
  assert.equal(answer.status, 'completed');
  assert.equal(answer.output_text, 'echo: weather in Paris?');
});

test('function call streamed through the stream helper', async () => {
  const stream = client.responses.stream({ model: 'gpt-test', input: 'weather?', tools });
  let args = '';
  stream.on('response.function_call_arguments.delta', (e) => { args += e.delta; });
  const final = await stream.finalResponse();
  assert.equal(args, '{"city":"Paris"}');
  assert.equal(final.output[0].arguments, '{"city":"Paris"}');
});

test('store:false keeps nothing', async () => {
  const r = await client.responses.create({ model: 'echo', input: 'forget me', store: false });
  assert.equal(r.store, false);
  await assert.rejects(client.responses.retrieve(r.id), (e) => e.status === 404);
});

test('another API key cannot read, delete or continue a response', async () => {
  const r = await client.responses.create({ model: 'echo', input: 'private' });
  await assert.rejects(other.responses.retrieve(r.id), (e) => e.status === 404);
  await assert.rejects(other.responses.delete(r.id), (e) => e.status === 404);
  await assert.rejects(
    other.responses.create({ model: 'echo', input: 'x', previous_response_id: r.id }),
    (e) => e.status === 400 && e.code === 'previous_response_not_found');
});

test('errors in OpenAI form', async () => {
  await assert.rejects(client.responses.create({ model: 'no-such-model', input: 'x' }),
    (e) => e.status === 404 && e.code === 'model_not_found' && e.error.type === 'invalid_request_error');
  await assert.rejects(client.responses.create({ model: 'echo', input: 'x', background: true, store: false }),
    (e) => e.status === 400 && e.param === 'store');
  const bad = new OpenAI({ baseURL: base, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.responses.create({ model: 'echo', input: 'x' }), (e) => e.status === 401);
});

test('resume a stored stream: retrieve with stream and starting_after, the stream helper by response_id', async () => {
  const created = await client.responses.create({ model: 'gpt-test', input: 'resume', stream: true });
  const live = [];
  for await (const e of created) live.push(e);
  const id = live[0].response.id;
  const again = await client.responses.retrieve(id, { stream: true, starting_after: 3 });
  const replayed = [];
  for await (const e of again) replayed.push(e);
  assert.deepEqual(replayed, live.slice(4));
  let deltas = '';
  const helper = client.responses.stream({ response_id: id, starting_after: 4 });
  helper.on('response.output_text.delta', (e) => { deltas += e.delta; });
  const final = await helper.finalResponse();
  assert.equal(final.output_text, 'echo: resume');
  assert.equal(deltas, ' resume', 'only the deltas after sequence number 4');
});

test('background: queued at once, polled to completion; cancel of a foreground response refused', async () => {
  const queued = await client.responses.create({ model: 'gpt-test', input: 'in the background', background: true });
  assert.equal(queued.status, 'queued');
  assert.equal(queued.background, true);
  let r = queued;
  for (let i = 0; i < 200 && (r.status === 'queued' || r.status === 'in_progress'); i++) {
    await new Promise((ok) => setTimeout(ok, 20));
    r = await client.responses.retrieve(queued.id);
  }
  assert.equal(r.status, 'completed');
  assert.equal(r.output_text, 'echo: in the background');
  const again = await client.responses.cancel(queued.id);
  assert.equal(again.status, 'completed', 'cancel of a finished response returns it as it is');
  const fg = await client.responses.create({ model: 'echo', input: 'now' });
  await assert.rejects(client.responses.cancel(fg.id), (e) => e.status === 400);
});
