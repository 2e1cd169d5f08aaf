package agent

import (
	"bytes"
	"context"
	"log/slog"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/subject"
)

// The runtime (Runtime) saves a thread as each run starts and before its
// end is sent, as records of the thread store: the head (the thread, its
// checkpoints listed, and its values unless ValuesAt names the checkpoint
// that holds them) and one record per checkpoint, each written once.

// The thread store keys of a thread's records.
const headKey = "agent"

// checkpointKey is a checkpoint's record key: its id (an agent backend's
// own, any string) encoded as one key token.
func checkpointKey(id string) string { return "agent.ckpt." + subject.Key(id) }

// readHead reads a thread's head record, with its checkpoints listed but
// not its values (readState). It returns a nil record for a thread
// the store does not hold (rev 0), for a head that is unreadable (rev its
// revision: a save replaces it), and, not decoding it, for a head still at
// revision held (the caller has it; 0: none).
func readHead(ctx context.Context, store canonical.ThreadStore, thread string, held uint64, log *slog.Logger) (*threadRecord, uint64, error) {
	head, rev, err := store.Get(ctx, thread, headKey)
	switch {
	case canonical.CodeOf(err) == canonical.CodeNotFound:
		return nil, 0, nil
	case err != nil:
		return nil, 0, err
	case held != 0 && rev == held:
		return nil, rev, nil
	}
	rec := decodeHead(head, thread, log)
	if rec == nil {
		return nil, rev, nil
	}
	return rec, rev, readCheckpoints(ctx, store, rec, log)
}

// readState reads a thread's whole record: its head, checkpoints and
// values. A head whose values' checkpoint the store no longer holds
// expired with it (records expire a while after their last write, and a
// head naming an older checkpoint may be written after it): the thread
// reads as one the store does not hold, the head's revision returned.
func readState(ctx context.Context, store canonical.ThreadStore, thread string, held uint64, log *slog.Logger) (*threadRecord, uint64, error) {
	rec, rev, err := readHead(ctx, store, thread, held, log)
	if rec == nil || err != nil || rec.ValuesAt == "" {
		return rec, rev, err
	}
	values, err := readCheckpointValues(ctx, store, thread, rec.ValuesAt)
	if canonical.CodeOf(err) == canonical.CodeNotFound {
		log.Info("thread's state expired", "thread", thread, "checkpoint", rec.ValuesAt)
		return nil, rev, nil // as an unreadable head: a save replaces it
	}
	if err != nil {
		return nil, 0, err
	}
	rec.Values = values
	return rec, rev, nil
}

// decodeHead decodes a head record; nil (logged) when unreadable.
func decodeHead(head []byte, thread string, log *slog.Logger) *threadRecord {
	rec := &threadRecord{}
	if err := json.Unmarshal(head, rec, recordJSON); err != nil || rec.Version < 2 || rec.Version > stateVersion {
		log.Warn("thread record unreadable; starting afresh", "thread", thread, "err", err, "version", rec.Version)
		return nil
	}
	for i := range rec.Checkpoints {
		rec.Checkpoints[i].saved = true
	}
	return rec
}

// readCheckpoints reads the checkpoints a version 2 head lists by id
// (CheckpointIDs) into rec.Checkpoints. A listed checkpoint the store
// lacks (it expired, or another instance let it go meanwhile) or cannot
// decode is left out.
func readCheckpoints(ctx context.Context, store canonical.ThreadStore, rec *threadRecord, log *slog.Logger) error {
	for _, id := range rec.CheckpointIDs {
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
		cp.Values = nil // read back when a fork needs them (runtimeRun.fork)
		rec.Checkpoints = append(rec.Checkpoints, cp)
	}
	rec.CheckpointIDs = nil
	return nil
}

// recordJSON writes and reads the records: nil maps and slices as null,
// as encoding/json wrote them before, so a record stored then reads back
// the same (TestRecordStoredBefore). The values hold clients' JSON as it
// came: invalid UTF-8 in it is written as U+FFFD, a repeated member name
// kept, rather than failing the save.
var recordJSON = json.JoinOptions(json.FormatNilMapAsNull(true), json.FormatNilSliceAsNull(true),
	json.AllowInvalidUTF8(true), json.AllowDuplicateNames(true))

// encodeHead is rec as its head record: its checkpoints without their
// values, and its values unless ValuesAt names the checkpoint that holds
// them.
func encodeHead(rec *threadRecord) ([]byte, error) {
	head := *rec
	head.Version = stateVersion
	head.Checkpoints = make([]checkpointRec, len(rec.Checkpoints))
	for i, cp := range rec.Checkpoints {
		cp.Values = nil
		head.Checkpoints[i] = cp
	}
	if head.ValuesAt != "" {
		head.Values = nil
	}
	return json.Marshal(&head, recordJSON)
}

// readCheckpointValues reads a checkpoint's values from its record (a
// fork's, and a values event's that names its checkpoint).
func readCheckpointValues(ctx context.Context, store canonical.ThreadStore, thread, id string) (map[string]json.Value, error) {
	b, _, err := store.Get(ctx, thread, checkpointKey(id))
	if err != nil {
		return nil, err
	}
	return checkpointValues(b)
}

// readCheckpointValuesJSON reads a checkpoint's values from its record as
// the JSON object the record holds, not decoded (a values frame's data):
// a reader of a long conversation's state holds the record and the
// object, not a decoded copy and a re-encoded one besides.
func readCheckpointValuesJSON(ctx context.Context, store canonical.ThreadStore, thread, id string) ([]byte, error) {
	b, _, err := store.Get(ctx, thread, checkpointKey(id))
	if err != nil {
		return nil, err
	}
	var stored struct {
		Values json.Value `json:"values"`
	}
	if err := json.Unmarshal(b, &stored, recordJSON); err != nil { // as checkpointValues reads it
		return nil, canonical.Errorf(canonical.CodeDataLoss, "checkpoint record does not decode: %v", err)
	}
	if v := bytes.TrimSpace(stored.Values); len(v) == 0 || string(v) == "null" { // none: an empty state
		return []byte("{}"), nil
	}
	return stored.Values, nil
}

// encodeCheckpoint is cp as its checkpoint record.
func encodeCheckpoint(cp *checkpointRec) ([]byte, error) { return json.Marshal(cp, recordJSON) }
