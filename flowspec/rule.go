package flowspec

// IsValid reports whether both the match and the action are valid.
func (r Rule) IsValid() bool { return r.Match.IsValid() && r.Action.IsValid() }
