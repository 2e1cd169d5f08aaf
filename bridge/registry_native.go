package bridge

import (
	"net/http"

	"github.com/interlingua-dev/interlingua/adapters/native"
)

func init() {
	registerFrontend("native", func(mux *http.ServeMux, d FrontendDeps) error {
		native.NewFrontend(native.Config{Runner: d.Runner, Observer: d.Observer, Logger: d.Log,
			SlowConsumers: d.Metrics.SlowConsumers.WithLabelValues("native")}).Mount(mux)
		return nil
	})
}
