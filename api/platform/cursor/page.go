package cursor

import "fmt"

// Page is a validated page request: how many rows and where to start.
type Page struct {
	Limit int
	After *Position
}

// Request turns raw query values into a Page. limit 0 means the default; a
// cursor that does not verify is ErrInvalid.
func (c Codec) Request(endpoint, filters, token string, limit int) (Page, error) {
	if limit == 0 {
		limit = DefaultLimit
	}
	page := Page{Limit: min(max(limit, MinLimit), MaxLimit)}
	if token == "" {
		return page, nil
	}
	pos, err := c.Decode(endpoint, filters, token)
	if err != nil {
		return Page{}, err
	}
	page.After = &pos
	return page, nil
}

// Next trims a result fetched with Limit+1 rows to the page and returns the
// cursor of the following page, or nil on the last page. position reads the
// ordering key of a row.
func Next[T any](c Codec, endpoint, filters string, page Page, rows []T, position func(T) Position) ([]T, *string) {
	if len(rows) <= page.Limit {
		return rows, nil
	}
	rows = rows[:page.Limit]
	next := c.Encode(endpoint, filters, position(rows[len(rows)-1]))
	return rows, &next
}

// Keyset returns the SQL condition (prefixed with " AND ") that starts a
// page after its cursor, and the arguments extended with the cursor's
// values; createdAt and id name the ordering columns. Without a cursor it
// returns no condition.
func (p Page) Keyset(args []any, createdAt, id string) (string, []any) {
	if p.After == nil {
		return "", args
	}
	cond := fmt.Sprintf(" AND (%s, %s) < ($%d, $%d)", createdAt, id, len(args)+1, len(args)+2)
	return cond, append(args, p.After.CreatedAt, p.After.ID)
}

// OrderLimit returns the ordering of every cursor list, newest first, with
// one row more than the page so the caller can tell whether another page
// exists.
func (p Page) OrderLimit(createdAt, id string) string {
	return fmt.Sprintf(" ORDER BY %s DESC, %s DESC LIMIT %d", createdAt, id, p.Limit+1)
}
