package scripted

import "github.com/interlingua-dev/interlingua/bench/load"

// loadProfile is the scripted backend's part in the load harness: the
// backend without a peer, streaming what each request's parameters ask
// for (model "stream") or its prompt back a word per delta (model
// "echo").
var loadProfile = &load.Load{Title: "scripted", Scripted: true}
