package bench

import "slices"

// A Figure is a measured or derived value, or none: a measurement that
// failed or did not run. The report shows none as n/a.
type Figure struct {
	V     float64
	Valid bool
}

// Some is the figure v.
func Some(v float64) Figure { return Figure{V: v, Valid: true} }

// Median is the middle of vs (the mean of the two middle ones for an even
// count); none for no values. vs is not changed.
func Median(vs []float64) Figure {
	if len(vs) == 0 {
		return Figure{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return Some(s[n/2])
	}
	return Some((s[n/2-1] + s[n/2]) / 2)
}

// Ratio is a / b; none when either is none or b is not positive.
func Ratio(a, b Figure) Figure {
	if !a.Valid || !b.Valid || b.V <= 0 {
		return Figure{}
	}
	return Some(a.V / b.V)
}

// Larger is the larger of a and b; none when either is none (a pipeline
// is as slow as its slower end, and unknown when either end is).
func Larger(a, b Figure) Figure {
	if !a.Valid || !b.Valid {
		return Figure{}
	}
	return Some(max(a.V, b.V))
}

// Rate is n per the figure's seconds; none when it is none or not positive.
func Rate(n float64, sec Figure) Figure {
	if !sec.Valid || sec.V <= 0 {
		return Figure{}
	}
	return Some(n / sec.V)
}
