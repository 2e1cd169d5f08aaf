//go:build race

package runner

// raceEnabled: the race detector slows the byte-heavy cases tenfold.
const raceEnabled = true
