package sweep

import (
	"fmt"
	"strconv"
	"strings"
)

// Merge joins the rows of shard outputs (names[i] holds shards[i]) into
// the study's rows in point order, and checks that every point of the
// study is present exactly once and that no row belongs to another study
// or configuration.
func Merge(st *Study, shards [][]Row, names []string) ([]Row, error) {
	byID := map[string]*Point{}
	for i := range st.Points {
		byID[st.Points[i].ID] = &st.Points[i]
	}
	out := make([]Row, len(st.Points))
	from := make([]string, len(st.Points))
	for s, rows := range shards {
		for _, r := range rows {
			p := byID[r.ID]
			if p == nil || p.Index != r.Index {
				return nil, fmt.Errorf("sweep: merge: %s: row %d (id %s) is not a point of study %s as it stands "+
					"(another study, or the study or its clusters changed)", names[s], r.Index, r.ID, st.Name)
			}
			if from[p.Index] != "" {
				return nil, fmt.Errorf("sweep: merge: point %d (id %s) is in both %s and %s", p.Index, p.ID,
					from[p.Index], names[s])
			}
			from[p.Index] = names[s]
			out[p.Index] = r
		}
	}
	var missing []string
	n := 0
	for i, f := range from {
		if f == "" {
			n++
			if len(missing) < 10 {
				missing = append(missing, strconv.Itoa(i))
			}
		}
	}
	if n > 0 {
		more := ""
		if n > len(missing) {
			more = ", ..."
		}
		return nil, fmt.Errorf("sweep: merge: %d of %d points missing (%s%s): a shard did not finish or was not given",
			n, len(st.Points), strings.Join(missing, ", "), more)
	}
	return out, nil
}
