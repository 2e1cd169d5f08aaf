package agent

import (
	"context"
	"log/slog"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// The runtime (Runtime) saves a thread as each run starts and before its
// end is sent, as records of the thread store: the head (the thread's
// values, its whole history, once) and one record per checkpoint, each
// written once.

// The thread store keys of a thread's records.
const headKey = "agent"

// checkpointKey is a checkpoint's record key: its id (an agent backend's
// own, any string) encoded as one key token.
func checkpointKey(id string) string { return "agent.ckpt." + subject.Key(id) }

// readRecord reads a thread's head record and the checkpoints it lists,
// but those in skip (the caller has them). It returns a nil record for a
// thread the store does not hold (rev 0) or whose head is unreadable (rev
// its revision: a save replaces it).
func readRecord(ctx context.Context, store canonical.ThreadStore, thread string, skip map[string]bool, log *slog.Logger) (*threadRecord, uint64, error) {
	head, rev, err := store.Get(ctx, thread, headKey)
	if canonical.CodeOf(err) == canonical.CodeNotFound {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	rec := decodeHead(head, thread, log)
	if rec == nil {
		return nil, rev, nil
	}
	if err := readCheckpoints(ctx, store, rec, skip, log); err != nil {
		return nil, 0, err
	}
	return rec, rev, nil
}

// decodeHead decodes a head record; nil (logged) when unreadable.
func decodeHead(head []byte, thread string, log *slog.Logger) *threadRecord {
	rec := &threadRecord{}
	if err := json.Unmarshal(head, rec, recordJSON); err != nil || rec.Version != stateVersion {
		log.Warn("thread record unreadable; starting afresh", "thread", thread, "err", err)
		return nil
	}
	return rec
}

// readCheckpoints reads the checkpoints rec lists, but those in skip, into
// rec.Checkpoints. A listed checkpoint the store lacks (it expired, or
// another instance let it go meanwhile) or cannot decode is left out.
func readCheckpoints(ctx context.Context, store canonical.ThreadStore, rec *threadRecord, skip map[string]bool, log *slog.Logger) error {
	for _, id := range rec.CheckpointIDs {
		if skip[id] {
			continue
		}
		b, _, err := store.Get(ctx, rec.Thread, checkpointKey(id))
		if canonical.CodeOf(err) == canonical.CodeNotFound {
			log.Debug("a listed checkpoint is not in the store", "thread", rec.Thread, "checkpoint", id)
			continue
		}
		if err != nil {
			return err
		}
		cp := checkpointRec{saved: true}
		if err := json.Unmarshal(b, &cp, recordJSON); err != nil {
			log.Warn("checkpoint record unreadable; left out", "thread", rec.Thread, "checkpoint", id, "err", err)
			continue
		}
		cp.Values = nil // read back when a fork needs them (checkpointValuesLocked)
		rec.Checkpoints = append(rec.Checkpoints, cp)
	}
	return nil
}

// recordJSON writes and reads the records: nil maps and slices as null,
// as encoding/json wrote them before, so a record stored then reads back
// the same (TestRecordStoredBefore). The values hold clients' JSON as it
// came: invalid UTF-8 in it is written as U+FFFD, a repeated member name
// kept, rather than failing the save.
var recordJSON = json.JoinOptions(json.FormatNilMapAsNull(true), json.FormatNilSliceAsNull(true),
	json.AllowInvalidUTF8(true), json.AllowDuplicateNames(true))

// encodeHead is rec as its head record: its checkpoints by id.
func encodeHead(rec *threadRecord) ([]byte, error) {
	head := *rec
	head.CheckpointIDs = make([]string, len(rec.Checkpoints))
	for i := range rec.Checkpoints {
		head.CheckpointIDs[i] = rec.Checkpoints[i].ID
	}
	return json.Marshal(&head, recordJSON)
}

// encodeCheckpoint is cp as its checkpoint record.
func encodeCheckpoint(cp *checkpointRec) ([]byte, error) { return json.Marshal(cp, recordJSON) }
