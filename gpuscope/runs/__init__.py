"""gpuscope.runs"""
