// The official openai npm client's WebSocket mode (ResponsesWS, on the
// ws package) against an Interlingua instance at $INTERLINGUA_URL
// (adapters/responses TestNodeSDK starts it): response.create messages on
// one socket, answered with the stream's events, the last response
// continued by previous_response_id with store false, and a refusal as
// the client's error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';

const client = new OpenAI({ baseURL: process.env.INTERLINGUA_URL + '/v1', apiKey: process.env.INTERLINGUA_KEY, maxRetries: 0 });

// turn sends a response.create and resolves with its events, to the
// terminal one, or rejects with the client's error.
function turn(ws, body) {
  return new Promise((resolve, reject) => {
    const events = [];
    const onEvent = (ev) => {
      events.push(ev);
      if (ev.type === 'response.completed' || ev.type === 'response.failed' || ev.type === 'response.incomplete') {
        done();
        resolve(events);
      }
    };
    const onError = (err) => {
      done();
      reject(err);
    };
    const done = () => {
      ws.off('event', onEvent);
      ws.off('error', onError);
    };
    ws.on('event', onEvent);
    ws.on('error', onError);
    ws.send({ type: 'response.create', ...body });
  });
}

test('WebSocket mode: two turns on one socket, store false', async () => {
  const ws = new ResponsesWS(client);
  try {
    const first = await turn(ws, { model: 'gpt-test', store: false, input: 'hello over a socket' });
    assert.deepEqual(first.map((ev) => ev.sequence_number), first.map((_, i) => i));
    assert.equal(first[0].type, 'response.created');
    const done = first[first.length - 1];
    assert.equal(done.type, 'response.completed');
    assert.equal(done.response.store, false);
    assert.equal(done.response.output[0].content[0].text, 'echo: hello over a socket');
    const text = first.filter((ev) => ev.type === 'response.output_text.delta').map((ev) => ev.delta).join('');
    assert.equal(text, 'echo: hello over a socket');

    const second = await turn(ws, { model: 'gpt-test', store: false, previous_response_id: done.response.id, input: 'and again' });
    const end = second[second.length - 1];
    assert.equal(end.type, 'response.completed');
    assert.equal(end.response.previous_response_id, done.response.id);
    assert.equal(end.response.output[0].content[0].text, 'echo: and again');
  } finally {
    ws.close();
  }
});

test('WebSocket mode: a refusal is the client\'s error, and the socket goes on', async () => {
  const ws = new ResponsesWS(client);
  try {
    await assert.rejects(turn(ws, { model: 'no-such-model', input: 'x' }), (err) => {
      assert.equal(err.error.type, 'error');
      assert.equal(err.error.status, 404);
      assert.equal(err.error.error.code, 'model_not_found');
      return true;
    });
    const after = await turn(ws, { model: 'echo', input: 'still open' });
    assert.equal(after[after.length - 1].response.output_text ?? after[after.length - 1].response.output[0].content[0].text, 'still open');
  } finally {
    ws.close();
  }
});
