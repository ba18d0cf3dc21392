// Package jsondoctest checks decoded values the way PostgreSQL will see
// them, for fuzz targets of the decoders that feed it.
package jsondoctest

import (
	"fmt"
	"reflect"

	"github.com/cairnhq/cairn/api/platform/jsondoc"
)

// Storable returns an error naming the first string in v (a decoded value:
// structs, pointers, maps, slices, interfaces) that a PostgreSQL text or
// jsonb column would refuse: invalid UTF-8 or a NUL character.
func Storable(v any) error {
	return storable(reflect.ValueOf(v))
}

func storable(v reflect.Value) error {
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); !jsondoc.StorableText(s) {
			return fmt.Errorf("decoded %q, which PostgreSQL cannot store", s)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return storable(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if err := storable(v.Field(i)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // bytes, not text
		}
		for i := range v.Len() {
			if err := storable(v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if err := storable(it.Key()); err != nil {
				return err
			}
			if err := storable(it.Value()); err != nil {
				return err
			}
		}
	}
	return nil
}
