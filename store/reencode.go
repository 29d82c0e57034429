package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// reencodeFlowSpec re-encodes every stored rule from its text (migration
// 4). Before it, ribkeeper wrote the numeric operators true and false with
// their bits swapped against RFC 8955 Table 1 (true as lt|gt|eq = 000) and
// IPv6 flow labels in 1 or 2 octets; the stored text always said what the
// operator meant. Rows whose text gives other NLRI bytes get those bytes,
// so that the key, the reconciler and the routers agree with the text.
//
// Two active rules that now mean the same (a flow label stored in two
// widths) cannot both stay active (one rule per match): the older one is
// marked withdrawn, the newer one is kept. A text that no longer parses is
// left alone (the row keeps its bytes). The NLRI is updated in two steps,
// through a temporary unique value, so that two rules swapping their
// encodings (a true and a false) never collide half way.
func reencodeFlowSpec(ctx context.Context, t tx) error {
	type change struct {
		id     int64
		family int64
		active bool
		nlri   []byte
	}
	rs, err := t.query(ctx, `SELECT id, family, nlri, text, state FROM rules`)
	if err != nil {
		return err
	}
	var changes []change
	for rs.Next() {
		var (
			id, fam     int64
			nlri        []byte
			text, state string
		)
		if err := rs.Scan(&id, &fam, &nlri, &text, &state); err != nil {
			rs.Close()
			return err
		}
		f := flowspec.Family(fam)
		if f.IsRoute() {
			continue
		}
		r, err := flowspec.Parse(text)
		if err != nil || r.Match.Family() != f {
			continue
		}
		if b := r.Match.AppendTo(nil); !bytes.Equal(b, nlri) {
			changes = append(changes, change{id: id, family: fam, active: state == string(Active), nlri: b})
		}
	}
	err = rs.Err()
	rs.Close()
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		return nil
	}
	// A temporary value no encoder produces (an NLRI never starts with
	// 0xff 0xff), unique per row.
	for _, c := range changes {
		tmp := binary.BigEndian.AppendUint64([]byte{0xff, 0xff}, uint64(c.id))
		if _, err := t.exec(ctx, `UPDATE rules SET nlri = ? WHERE id = ?`, tmp, c.id); err != nil {
			return fmt.Errorf("rule %d: %w", c.id, err)
		}
	}
	for _, c := range changes {
		if c.active {
			// An active rule already holding this match (not itself
			// re-encoded, or re-encoded before) is the older duplicate
			// when its id is lower.
			var other int64
			err := t.queryRow(ctx, `SELECT id FROM rules WHERE family = ? AND nlri = ? AND state = 'active'`, c.family, c.nlri).Scan(&other)
			switch {
			case errors.Is(err, errNoRows):
			case err != nil:
				return fmt.Errorf("rule %d: %w", c.id, err)
			case other < c.id:
				if _, err := t.exec(ctx, `UPDATE rules SET state = 'withdrawn' WHERE id = ?`, other); err != nil {
					return fmt.Errorf("rule %d (a duplicate of %d): %w", other, c.id, err)
				}
			default:
				if _, err := t.exec(ctx, `UPDATE rules SET state = 'withdrawn' WHERE id = ?`, c.id); err != nil {
					return fmt.Errorf("rule %d (a duplicate of %d): %w", c.id, other, err)
				}
			}
		}
		if _, err := t.exec(ctx, `UPDATE rules SET nlri = ? WHERE id = ?`, c.nlri, c.id); err != nil {
			return fmt.Errorf("rule %d: %w", c.id, err)
		}
	}
	return nil
}
