package inspect

import (
	"path"
	"strconv"
)

func itoa(n int) string { return strconv.Itoa(n) }

func quote(s string) string { return strconv.Quote(s) }

func pathMatch(glob string) (bool, error) { return path.Match(glob, "") }
