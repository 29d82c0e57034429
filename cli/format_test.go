package cli

import (
	"testing"
	"time"
)

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                      "0s",
		400 * time.Millisecond:                 "0s",
		10 * time.Minute:                       "10m",
		9*time.Minute + 59*time.Second:         "9m59s",
		36 * time.Hour:                         "1d12h",
		2*time.Hour + 5*time.Second:            "2h5s",
		3*24*time.Hour + 1500*time.Millisecond: "3d2s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestExpiresIn(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later, earlier := now.Add(90*time.Second), now.Add(-3*time.Minute)
	for _, tc := range []struct {
		t    *time.Time
		want string
	}{{nil, "never"}, {&later, "in 1m30s"}, {&earlier, "3m ago"}} {
		if got := expiresIn(tc.t, now); got != tc.want {
			t.Errorf("expiresIn(%v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

func TestSafeText(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ✓ 攻撃":  "plain text, ✓ 攻撃",
		"\x1b[2J":           `\x1b[2J`,
		"a\x00b":            `a\x00b`,
		"rtl\u202eoverride": `rtl\u202eoverride`,
		"bad\xff":           `bad\xff`,
		"c1\u009b":          `c1\u009b`,
		"tag\U000E0041":     `tag\U000e0041`,
	} {
		if got := safeText(in); got != want {
			t.Errorf("safeText(%q) = %q, want %q", in, got, want)
		}
	}
	if testing.AllocsPerRun(100, func() { safeText("plain text") }) != 0 {
		t.Error("safeText allocates for printable text")
	}
}
