// Strict<T> is T from @langchain/protocol with every index signature removed
// (the Extensible tails, `[key: string]: any`), recursively, so an object
// literal checked with `satisfies Strict<T>` may carry only the keys the
// schema names: a drifted key (eventId for event_id) is an excess property
// and fails, as does a drifted type. Pure records (Record<string, any>, such
// as tool-call args and state values) and `any` (values payloads) are left
// open, as the schema leaves them.
type KnownKeys<T> = keyof {
  [K in keyof T as string extends K ? never : number extends K ? never : K]: unknown;
};

type IsPureRecord<T> = [KnownKeys<T>] extends [never] ? (string extends keyof T ? true : false) : false;

export type Strict<T> = 0 extends 1 & T
  ? T
  : T extends readonly (infer U)[]
    ? Strict<U>[]
    : T extends object
      ? IsPureRecord<T> extends true
        ? T
        : { [K in keyof T as string extends K ? never : number extends K ? never : K]: Strict<T[K]> }
      : T;
