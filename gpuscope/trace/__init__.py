"""gpuscope.trace"""
