//! Match templates (SPEC 2.2): path, query and header matching, specificity ordering.
