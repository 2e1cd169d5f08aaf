package bridge

import (
	"log/slog"

	"github.com/interlingua-dev/interlingua/canonical"
)

// natsFailure is what a client is told when NATS fails the bridge: the
// canonical code and a plain message saying what could not be done. The
// NATS error itself (its subjects, err_code numbers, "nats: invalid key")
// names our internals and says nothing a client can act on, so it goes to
// the log only.
func natsFailure(log *slog.Logger, code canonical.Code, msg string, err error) *canonical.Error {
	log.Warn(msg, "err", err)
	return canonical.Errorf(code, "%s", msg)
}
