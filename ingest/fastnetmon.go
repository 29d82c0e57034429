package ingest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/ribkeeper/ribkeeper/signals"
)

// FastNetMonCall is what contrib/fastnetmon/ribkeeper-notify.sh forwards
// of one call of FastNetMon's notify script: its arguments (IP,
// DIRECTION, PPS, ACTION) and, for ban and attack_details, the attack
// details FastNetMon writes on its stdin.
type FastNetMonCall struct {
	IP        string `json:"ip"`
	Direction string `json:"direction"`
	PPS       uint64 `json:"pps"`
	Action    string `json:"action"`
	Details   string `json:"details,omitempty"`
}

// readFastNetMon reads one forwarded call as a signal without a vector:
// ban is start, attack_details ongoing, unban end. Only incoming attacks are signals:
// an outgoing one is traffic from a host of the operator's, which no
// rule for the host as a destination stops.
func (in *Ingest) readFastNetMon(src *source, body []byte) (signals.Signal, *Error) {
	var c FastNetMonCall
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&c)
	if err == nil {
		if _, err2 := dec.Token(); err2 != io.EOF {
			err = fmt.Errorf("data after the JSON object")
		}
	}
	if err != nil {
		return signals.Signal{}, newError(http.StatusBadRequest, CodeInvalidBody, "",
			"not a forwarded FastNetMon call: %s; use contrib/fastnetmon/ribkeeper-notify.sh as FastNetMon's notify_script_path", jsonProblem(err))
	}
	s := signals.Signal{Source: src.cfg.Name, PPS: c.PPS, At: in.clock.Now()}
	switch strings.ToLower(c.Action) {
	case "ban":
		s.State = signals.Start
	case "attack_details":
		s.State = signals.Ongoing
	case "unban":
		s.State = signals.End
	default:
		return s, newError(http.StatusBadRequest, CodeInvalidSignal, "action",
			"action %q is not ban, unban or attack_details (FastNetMon's fourth notify argument)", clip(c.Action))
	}
	if d := strings.ToLower(c.Direction); d != "incoming" && !(d == "" && s.State == signals.End) {
		return s, newError(http.StatusUnprocessableEntity, CodeInvalidSignal, "direction",
			"direction %q: only incoming attacks are signals (an outgoing one comes from a host of yours; a destination rule would not stop it)", clip(c.Direction))
	}
	t, err := parseTarget(c.IP)
	if err != nil {
		return s, newError(http.StatusBadRequest, CodeInvalidSignal, "ip", "%v", err)
	}
	s.Target = t
	// FastNetMon bans a host, not a vector, and its unban carries no
	// details: the signals of one ban carry no vector, so that ban,
	// attack_details and unban are one incident. What the details say
	// of the attack goes in Detail.
	details := fastNetMonDetails(c.Details)
	s.AttackID = details["attack uuid"]
	s.Detail = fmt.Sprintf("fastnetmon %s: %s attack on %s at %d pps", c.Action, strings.ToLower(c.Direction), c.IP, c.PPS)
	if at := details["attack type"]; at != "" {
		s.Detail += ", attack type " + at
	}
	if p := details["attack protocol"]; p != "" {
		s.Detail += ", protocol " + p
	}
	if len(s.Detail) > signals.MaxDetailBytes {
		s.Detail = s.Detail[:signals.MaxDetailBytes]
	}
	if len(s.AttackID) > signals.MaxIDBytes {
		s.AttackID = s.AttackID[:signals.MaxIDBytes]
	}
	if err := s.Check(); err != nil {
		return s, newError(http.StatusBadRequest, CodeInvalidSignal, "", "%v", err)
	}
	return s, nil
}

// fastNetMonDetails reads the "Key: value" lines of FastNetMon's attack
// details (keys lower case), e.g. "Attack type: syn_flood", "Attack
// protocol: tcp".
func fastNetMonDetails(text string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() && len(out) < 64 {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if k != "" && v != "" && out[k] == "" {
			out[k] = v
		}
	}
	return out
}
