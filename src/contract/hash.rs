//! Contract hash (SPEC section 1): `sha256:` + lowercase hex SHA-256 of the RFC 8785 canonical
//! JSON of `{"description","input_schema","operation","output_schema"}`.
