"""The whole reproduction as resumable stages over one output directory (``possym reproduce``)."""
