// Package xmlaction speaks the XML action stream: the Cortex-Prime
// "Streaming Execution Protocol" v1.0 (Trafexofive/Cortex-MK1,
// docs/STREAMING_PROTOCOL.md), in which a model answers with <thought>
// reasoning, <action type=".." mode=".." id="..">{JSON}</action> calls
// executed as soon as each </action> arrives, and a <response>.
//
// Directions:
//
//   - Decoder (model text → canonical): an incremental scanner fed chunks
//     cut at any byte, inside tags and runes included. <thought> text
//     streams as reasoning deltas and <response> text (and text outside
//     tags) as text deltas at once — only a possible partial tag, character
//     reference, $reference or UTF-8 sequence at a chunk's end is held back.
//     An <action> becomes a tool-call block whose arguments are its JSON
//     body as written, streamed from the moment its "name" is known and
//     finished at </action>; the tag's attributes travel in the block's
//     "xml.attributes" extension. A malformed action (empty body, invalid
//     JSON, not an object, missing name, bad field, unknown type or mode,
//     missing or duplicate id, unterminated) gets a tool_failed event whose
//     message names the problem (kind in the "xml.error" extension); the
//     stream goes on. Text outside tags, unknown tags and a literal '<' are
//     text; whitespace-only runs between tags are dropped; stray closing
//     tags are dropped. Tags match the reference's rules: case-insensitive
//     names, <response> implicitly ends a <thought>, an <action> inside a
//     <thought> is an action, </action> inside a JSON string does not close
//     the body (with the reference's recovery for an unbalanced quote).
//   - Wrap (executor): wraps any text backend (per route, xml: true). The
//     inner stream's text goes through the Decoder and each action runs when
//     parsed: sync (later actions and all later output wait for it), async
//     (in parallel), fire_and_forget (never delays anything, not even the
//     run's end; it outlives its run, bounded by its timeout, and its failure
//     is logged and, while the run lasts, emitted as tool_failed).
//     depends_on (ids; forward references; an entry naming no id resolves to
//     the one earlier action of that name), timeout, retry with doubling
//     backoff, on_error fail/skip/retry. A failed dependency skips its
//     dependents with a tool error naming it; unknown dependencies and
//     cycles fail at the end of the model's stream. output_key binds $name
//     (else the action id does): in parameters a whole-string "$name" takes
//     the value's JSON type and a reference inside a longer string is
//     stringified; in <response> text the response streams up to the
//     reference and then the value once it is ready. Dispatch by type: tool
//     and relic call canonical.Tools (the bridge's allowlist: built-ins and
//     NATS micro services on <prefix>.tool.<name>); agent, llm and workflow
//     start a nested run through canonical.Runner on the target of that name,
//     its events in namespace [action id] opened by a lifecycle event with
//     cause toolCall, its text the action's result (a name no route serves
//     is called as a tool instead, so an agent can be a micro service; a
//     fire_and_forget nested run's own events are not shown, since it may
//     outlive the run).
//     Tool events (tool_started with the resolved parameters, tool_finished
//     with the result, tool_failed) are canonical, so every frontend shows
//     them. A retry is announced by a custom "xml.retry" event.
//   - Encoder and Frontend (canonical → XML text): POST /v1/xml/stream
//     renders any run: reasoning → <thought>, tool calls → <action> (a call
//     from another protocol gets the body {"name":..,"parameters":ARGS}),
//     text → <response>, tool results → <observation>, errors → <error>.
//     Text is XML-escaped, so Decoder parses the output back to the same
//     thought, action and response blocks. <observation> and <error> are
//     not Cortex tags: Decoder reads them as text. The rendering is one
//     way, a view for clients: fed to an xml: true route, its actions are
//     actions again and run again (TestEncodeForeign).
//
// Interlingua choices and stated degradations:
//
//   - An action without an id attribute is action-<n> (n its 1-based
//     ordinal among the stream's actions) and runs: the Cortex spec does
//     not require an id; a later action naming an id already used fails
//     with duplicate_id.
//   - The Decoder decodes the XML character references &lt; &gt; &amp;
//     &quot; &apos; and &#N; / &#xH; in text (not in action bodies or
//     attributes), so rendered text round-trips.
//   - $references in <response> text are substituted while streaming (the
//     reference would forward them verbatim and add a response_resolved
//     event after the stream); a name bound to no action parsed so far, or
//     to a failed action, stays as written.
//   - A sync action holds back all output decoded after it, not only the
//     response, until it ends.
//   - v1.1 additions (<context_feed>, <response final>, type "internal")
//     are not supported: the final attribute is ignored, "internal" is an
//     unknown type.
//   - The Cortex SSE wire (chat_test_service token_type events) is not
//     served; the frontend renders the XML text itself.
//   - The renderer renders the agent's answer as canonical.AnswerStream
//     views the run: the root namespace and the graph's own nodes
//     (one-element namespaces such as LangGraph's ["model:<task id>"] and
//     ["tools:<task id>"]), one message after another; as LangGraph's
//     messages stream mode without subgraphs, it leaves out a subgraph's
//     own nodes (namespaces two or more deep) and nested runs a tool call
//     started (an action's nested run shows as its action's result), and
//     tool_started, tool_output, state, input answers and data or ref
//     blocks. An input request (from any namespace) is rendered as the
//     Interlingua element <interrupt id="..">payload JSON</interrupt>,
//     before the run's interrupted <error status="interrupted">; the
//     stream cannot resume it.
//   - Nested runs cannot be resumed: a nested run that asks for input fails
//     its action.
//   - A duplicate id's tool-call block and tool error carry that id (the
//     earlier action keeps it for dependencies and $references).
//   - Rendered <action> tags are in a canonical form (attributes in double
//     quotes where possible, type, mode and id first); an attribute value
//     holding both quote characters and a space, '>' or a quote after '='
//     has its double quotes written as single ones. A body cut at
//     MaxActionBytes renders as what was kept. A body whose JSON string is
//     never closed (an odd number of unescaped quotes) is rendered as it
//     came, but where the source ended it by the end of the stream, the
//     rendering's later tags may close that string: it need not parse back
//     to the same actions.
//
// Limits (Config): action body 1 MiB, opening tag 4096 bytes, 256 actions
// per run, 4 MiB of output held behind running actions, 1 MiB of nested
// run output per action, 5 minute attempts, 5 retries, nesting depth 4, 64
// fire_and_forget actions in flight per backend, 4 MiB request bodies. A
// breach is RESOURCE_EXHAUSTED naming the limit. Only allowlisted tools
// ever run: the model's output is untrusted.
package xmlaction
