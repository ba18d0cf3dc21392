-- create a foobar enum with values foo, bar:
CREATE TYPE /* TEMPLATE: schema */foobar AS ENUM ('foo', 'bar');
