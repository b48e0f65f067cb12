"""gpuscope.store"""
