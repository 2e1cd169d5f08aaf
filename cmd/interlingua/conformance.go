package main

import (
	"fmt"
	"io"
)

// conformanceMain runs `interlingua conformance`.
func conformanceMain(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "interlingua conformance: not built yet")
	return 2
}
