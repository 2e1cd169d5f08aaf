package main

import (
	"fmt"
	"io"
)

// benchMain runs `interlingua bench`.
func benchMain(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "interlingua bench: not built yet")
	return 2
}
