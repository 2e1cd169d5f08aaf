//go:build race

package glide

func init() { raceEnabled = true }
