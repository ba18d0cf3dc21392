DROP FUNCTION /* TEMPLATE: schema */foobar_in_bitmask;
