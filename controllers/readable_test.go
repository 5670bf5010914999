package controllers

import (
	"testing"
	"time"
)

func TestMeasuredFiguresAreRoundedForPeople(t *testing.T) {
	for in, want := range map[string]string{
		"139.286": "139", "140": "140", "48.93": "48.9", "9.996": "10", "1.4": "1.4", "0.01234": "0.0123",
		"0.0000166": "0.0000166", "13928.4": "13928", "0": "0", "": "", "not a number": "not a number",
	} {
		if got := readable(in); got != want {
			t.Errorf("readable(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[time.Duration]time.Duration{
		252354 * time.Microsecond:  252 * time.Millisecond,
		1567800 * time.Microsecond: 1570 * time.Millisecond,
		2524 * time.Microsecond:    2520 * time.Microsecond,
		25240 * time.Microsecond:   25200 * time.Microsecond,
		512 * time.Microsecond:     512 * time.Microsecond,
		1500 * time.Nanosecond:     2 * time.Microsecond,
		95 * time.Second:           95 * time.Second,
	} {
		if got := readableDuration(in); got != want {
			t.Errorf("readableDuration(%s) = %s, want %s", in, got, want)
		}
	}
}
