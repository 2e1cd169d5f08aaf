// The types captured payloads are checked against: @langchain/protocol
// 0.0.21 made strict (strict.ts), plus the few keys the reference's
// Interlingua choices add where the schema leaves records Extensible:
//  - message-finish.reason (choice 21, read by the SDK);
//  - since and min_available_seq on the replay-gap error frame (choice 4);
//  - as LangGraph (@langchain/langgraph-api 1.5.1) sends them: thread_id in
//    a command response's meta, and a message's run_id (the model call's
//    LangChain run) in the data of each of its messages events.
import type * as P from "@langchain/protocol";
import type { Strict } from "./strict.ts";

export type { Strict };

type Envelope = { type: "event"; event_id?: string; seq?: P.JsUint };

type MessageFinishX = Strict<P.MessageFinishData> & { reason?: "stop" | "length" | "tool_calls" | "content_filter" };

type MessagesEventX = {
  method: "messages";
  params: Omit<Strict<P.MessagesEvent["params"]>, "data"> & {
    data: (Strict<Exclude<P.MessagesData, P.MessageFinishData>> | MessageFinishX) & { run_id?: string };
  };
};

/** WireEvent is an Event envelope as the frontend sends it. */
export type WireEvent = Envelope & (Strict<Exclude<P.EventData, P.MessagesEvent>> | MessagesEventX);

/** Response is a CommandResponse whose result is the given command's. */
export type Response<R> = Omit<Strict<P.CommandResponse>, "result" | "meta"> & {
  result: Strict<R>;
  meta?: Strict<P.ResponseMeta> & { thread_id?: string };
};

/** Empty is EmptyResult as we send it: {}. */
export type Empty = Record<string, never>;

export type ErrorFrame = Strict<P.ErrorResponse>;

export type GapErrorFrame = Strict<P.ErrorResponse> & { since: number; min_available_seq: number };

// Keep the protocol import used even if a capture holds no payload.
export type _Channel = P.Channel;
