// The types captured payloads are checked against: @langchain/protocol
// 0.0.21 made strict (strict.ts), plus the few keys the reference's
// Interlingua choices add where the schema leaves records Extensible:
//  - message-finish.reason (choice 21, read by the SDK);
//  - since and min_available_seq on the replay-gap error frame (choice 4).
import type * as P from "@langchain/protocol";
import type { Strict } from "./strict.ts";

export type { Strict };

type Envelope = { type: "event"; event_id?: string; seq?: P.JsUint };

type MessageFinishX = Strict<P.MessageFinishData> & { reason?: "stop" | "length" | "tool_calls" | "content_filter" };

type MessagesEventX = {
  method: "messages";
  params: Omit<Strict<P.MessagesEvent["params"]>, "data"> & {
    data: Strict<Exclude<P.MessagesData, P.MessageFinishData>> | MessageFinishX;
  };
};

/** WireEvent is an Event envelope as the frontend sends it. */
export type WireEvent = Envelope & (Strict<Exclude<P.EventData, P.MessagesEvent>> | MessagesEventX);

/** Response is a CommandResponse whose result is the given command's. */
export type Response<R> = Omit<Strict<P.CommandResponse>, "result"> & { result: Strict<R> };

/** Empty is EmptyResult as we send it: {}. */
export type Empty = Record<string, never>;

export type ErrorFrame = Strict<P.ErrorResponse>;

export type GapErrorFrame = Strict<P.ErrorResponse> & { since: number; min_available_seq: number };

// Keep the protocol import used even if a capture holds no payload.
export type _Channel = P.Channel;
